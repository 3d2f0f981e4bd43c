"""Stage score: BLEU as sacreBLEU and as the paper computed it, and statistics over seeds."""
