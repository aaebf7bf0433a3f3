import functools


class E:
    @property
    def size(self):
        return len(self.items)

    @staticmethod
    def _fmt(x):
        return str(x)

    @functools.lru_cache(maxsize=None)
    def unused(self):
        return self.other

    def __repr__(self):
        return 'E'

    def t(self):
        return E._fmt(self.size)
