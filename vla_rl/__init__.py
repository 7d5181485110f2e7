"""vla_rl"""
