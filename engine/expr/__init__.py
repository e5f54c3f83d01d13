"""(package docstring pending)"""
