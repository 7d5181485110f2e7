"""world_models"""
