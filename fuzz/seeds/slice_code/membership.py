class E:
    def __init__(self, init_config):
        self.x = {}

    def t(self, k, j):
        a = self.x.get(k)
        if k not in self.x:
            return f'{self.x[k]!r:>{j}}'
        return (k in self.x[k]) and self.x[k][0]
