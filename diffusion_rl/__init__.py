"""diffusion_rl"""
