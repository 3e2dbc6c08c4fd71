"""Adapters that run agents written with other frameworks durably on runplane."""
