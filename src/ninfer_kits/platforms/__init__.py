"""A reader of what the machines kits run on provide: the known distributions (`distros`),
the driver each CUDA release needs (`cuda_drivers`), and a kit floor judged against a
distribution (`distro_verdict`). Shared by verify, floor and publish's kit index."""
