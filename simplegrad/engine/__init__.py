"""The engine: Variables, the tape and its events, Ops (the recorder), Parameters, batched
values, and the sweeps that run over a tape (reverse, forward, Taylor), with the entry printer
and the trace. Imports only ``primitives``, ``errors`` and ``pytree``."""
