"""The upstream SGLang patch series (data): one NN-<slug>/ folder per PR. See README.md."""
