"""What the rebuild workflow tells people: one issue per failing kit (`ninfer-kits alert`, in
issues.py) and the run's summary of every kit's outcome (`ninfer-kits summary`, in results.py).
"""
