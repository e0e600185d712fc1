"""A labelled corpus of real training runs: tiny models trained on CPU with the configuration that causes each
pathology (and a healthy twin of each), logged with the writers and tag conventions people use.

`python -m bench.corpus.generate` remakes `bench/corpus/runs/`; `bench/accuracy.py` scores the engine on it.
"""
