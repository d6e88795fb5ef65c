"""Fragmentation math the platform's profiles run on: FGD's fragment measure (``fragmentation``), its
node scores (``fgd_scores``), the ``default`` profile's look-ahead (``lookahead``: gap tables, CPU
pressure, gang reservations), the balance terms (``balance_terms``) and the Alibaba node/pod CSV
reader (``trace``, also behind the ``alibaba-openb`` cluster spec).

The placement engine is ``scheduler.engine``; the FGD benchmark harness is ``scheduler.bench.frag``.
"""
