"""The lab: what the site measures and draws, beside the models it measures.

Modules (each imports the learner's core and :mod:`convs2s_edu.training`, never the
command line)::

    timing       interleaved windows, the machine, verdicts and tables, FLOPs, decoding,
                 both models on the same data (compare) and their convergence
    bench        the ``convs2s-edu bench`` report: every path against the machine's limits
    samples      side-by-side sample outputs of several models
    experiments  the paper's ablations and Shi's claims, over seeds
    site         the site's configurations (quick mode) and the numbers it records
    figures      the gallery's figure helpers: capture what modules compute, heatmaps
    schematic    Figure 1 of each model as boxes and arrows, shapes from a forward pass

Import them from here: ``from convs2s_edu.lab import experiments, site``.
"""
