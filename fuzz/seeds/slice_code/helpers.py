class E:
    def __init__(self, init_config):
        self.x = {}

    def _get(self, key, strict=True):
        if key not in self.x:
            return None
        return self._deeper(key)

    def _deeper(self, k2):
        return self.x.get(k2)

    def t(self, k, j):
        return self._get(j, k) or self.x.pop(k, None)
