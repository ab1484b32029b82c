"""Loopback fakes of provider wire protocols, used with the real SDKs (base_url -> the fake)."""
