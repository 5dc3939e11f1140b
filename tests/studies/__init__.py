"""Tests of the one-off studies (experiments/studies): nothing else imports them."""
