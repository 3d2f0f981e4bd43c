"""A trained model for other toolkits: CTranslate2 (ct2.py) and Hugging Face transformers
(hf.py), written through their own APIs with the sentencepiece model and a settings file beside
the weights (bundle.py). `aiayn export` runs them."""
