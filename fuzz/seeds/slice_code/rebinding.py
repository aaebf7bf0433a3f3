class E:
    def __init__(self, init_config):
        self.x = {}

    def t(self,
          k: str = "a,b",
          *args, **kw) -> dict:
        """Doc with self.y and ) unbalanced."""
        k, j = 1, 2  # self.z in a comment
        f = lambda k: self.x[k]
        with open('f') as k:
            return [self.x[k] for k in self.x if (n := k)]
