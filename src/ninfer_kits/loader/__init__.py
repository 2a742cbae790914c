"""Reading a target as glibc's dynamic loader would, for verify and the portable repair alike."""
