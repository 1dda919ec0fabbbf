"""The lab: what the site measures and draws, beside the models it measures.

Modules (each imports the learner's core and :mod:`convs2s_edu.training`, never the
command line)::

    timing       interleaved timing windows, their spread, the machine, the speed verdict
    bench        throughput per execution path, FLOPs per token, fractions of the CPU's peak
    compare      both models on the same data: the table, timed interleaved
    samples      side-by-side sample outputs of several models
    experiments  the paper's ablations and the seed article's claims, over seeds
    site         the site's configurations (quick mode) and the numbers it records
    figures      the gallery's figure helpers: capture what modules compute, heatmaps
    schematic    Figure 1 of each model as boxes and arrows, shapes from a forward pass

Import them from here: ``from convs2s_edu.lab import experiments, site``.
"""
