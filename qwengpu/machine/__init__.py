"""The SIMT machine compiled into Qwen3.5 layers: micro-ISA, assembler, simulator, circuits, runtime."""
