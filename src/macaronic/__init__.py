"""Macaronic: one frozen base, specialist LoRA adapters, one adapter per user turn."""

__version__ = "0.1.0"
