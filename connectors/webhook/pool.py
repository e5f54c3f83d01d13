"""placeholder"""
class AcceptorPool:  # noqa
    pass
