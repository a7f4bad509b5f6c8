"""The reference interpreter: the semantic oracle of qwenGPU."""
