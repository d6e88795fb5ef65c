"""Interference-model benchmarks: held-out accuracy and prediction speed (``evaluate``) and the
pack-or-not classifier study (``pack_study``)."""
