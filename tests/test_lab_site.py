"""Tests of ``convs2s_edu.lab.site``, the settings of the documentation site: the quick mode
shrinks the site's training config."""

from convs2s_edu.lab.site import site_config


def test_quick_mode_shrinks_the_site_config(monkeypatch):
    monkeypatch.delenv("CONVS2S_EDU_QUICK", raising=False)
    full = site_config("gru")
    assert (full.n_train, full.epochs, full.batch_size, full.lr) == (10_000, 30, 128, 1e-3)
    monkeypatch.setenv("CONVS2S_EDU_QUICK", "1")
    quick = site_config("gru")
    assert quick.n_train < full.n_train and quick.epochs < full.epochs
    assert (quick.vocab_size, quick.min_len, quick.max_len) == (50, 8, 20)
