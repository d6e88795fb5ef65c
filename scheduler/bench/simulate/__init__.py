"""The simulator benchmark's reporting: markdown tables of simulation reports (``report``) and their
plots (``plots``). The simulator itself (``scheduler.sim``) stays in the library: the platform's
replay command runs it."""
