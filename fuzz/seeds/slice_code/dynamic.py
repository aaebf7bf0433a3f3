class E:
    def __init__(self, init_config):
        self.x = {}

    def t(self, k):
        return getattr(self, k)

    def u(self):
        return vars(self)
