"""sims"""
