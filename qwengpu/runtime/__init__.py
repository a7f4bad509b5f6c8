"""Running the machine: the built checkpoint (`checkpoint`), the launch prompt (`prompt`), the
machine's tokenizer (`tokenizer`) and the engines a launch runs on (the simulator, the stock
transformers forward, the compact engine)."""
