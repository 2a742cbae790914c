"""What the machines kits run on provide: distributions, CUDA drivers, and a floor judged."""
