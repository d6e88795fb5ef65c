"""The FGD trace benchmark: the paper's fill-the-cluster method (``experiment``), binning and
summaries (``metrics``) and markdown tables beside the published numbers (``report``)."""
