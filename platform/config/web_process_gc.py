"""Keep the garbage collector's pauses short in a web process.

CPython's cyclic collector stops the whole process (every request it is serving) while it walks the
objects of the generations it collects. Two things made those walks long under load:

- **The oldest generation holds the start-up heap.** A web process holds over a hundred thousand
  objects from its imports (models, URL patterns, DRF, serializers, the OpenAPI machinery) that live
  as long as the process, so each full collection walked them all and found nothing there.
  ``gc.freeze()`` moves them to a permanent generation the collector skips.
- **The youngest generation fills after 700 allocations.** A job list allocates tens of thousands of
  tracked objects, so collections ran several times per request and promoted the request's
  still-live rows to older generations, which then had to be walked again. A larger first threshold
  lets most of a request's objects die by reference counting before any collection sees them.

docs/benchmarks.md (issue 23) has the measurements behind both.
"""

import gc

from django.urls import get_resolver

# Allocations (net of deallocations) between two collections of the youngest generation; CPython's
# default is 700. The older generations' thresholds keep their defaults.
YOUNG_GENERATION_THRESHOLD = 10_000


def tune_web_process_gc() -> int:
    """Import the views now (they would otherwise arrive with the first requests, after the freeze),
    collect once, freeze what is left, and raise the youngest generation's threshold. Returns how many
    objects were frozen."""
    get_resolver().url_patterns  # noqa: B018 (importing every view module is the point)
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_GENERATION_THRESHOLD, older, oldest)
    return gc.get_freeze_count()
