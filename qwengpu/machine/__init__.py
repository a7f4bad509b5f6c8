"""The machine: a 4-lane SIMT GPU and its specification -- the geometry (`config`), the micro-op
ISA (`uops`), the program image and its word format (`image`, `format`), the memory map
(`layout`), the token protocol (`tokens`), the token-level simulator (`simulator`) and the
circuits (`hardware`)."""
