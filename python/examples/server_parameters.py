"""A torch module's parameters kept on the parameter servers, one dense table each.

Each parameter tensor is one dense table of width 1 named
<prefix>/<parameter name> (e.g. "torch_mlp/0.weight"), in torch's layout
(row-major, nn.Linear weights as out x in). The tables are created here:
every worker asks, the servers create each once and take an identical
request as a no-op. Weights (2-D tensors) start Glorot-uniform, biases (1-D)
at zero, as ps_worker's models; the servers draw the values, so every worker
starts from the same parameters whatever torch's own initialization was.

The client reads into and pushes from the tensors' own memory: the NumPy
arrays it is handed are views of the parameters and of autograd's gradient
tensors, so no copy is made on this side. The optimizer runs on the servers.

A step's push_pull of every table goes out in one call
(Client.push_pull_many: one round trip per server for all the tables), since
a round trip costs more than a small table's data. Pulls (the start and the
evaluation) go table by table.

Not thread-safe itself: one pull or push_pull at a time.
"""

import zlib


class ServerParameters:
    def __init__(self, client, module, prefix, seed, optimizer_fields):
        """Creates (or finds) the tables; raises paramserver.Error from create_table.

        optimizer_fields: create_table's optimizer arguments (optimizer,
        learning_rate and its hyper-parameters).
        """
        self.client = client
        self.tables = []  # (table name, parameter tensor)
        for name, param in module.named_parameters():
            table = f"{prefix}/{name}"
            if param.dim() == 2:
                fan_out, fan_in = param.shape
                bound = (6.0 / (fan_in + fan_out)) ** 0.5
                init = dict(initializer="uniform", init_low=-bound, init_high=bound)
            else:
                init = dict(initializer="zeros")
            # A seed per table that is the same in every process (hash() is not).
            table_seed = (seed * 1000003 + zlib.crc32(name.encode())) % (1 << 63)
            client.create_table(table, size=param.numel(), seed=table_seed, **init,
                                **optimizer_fields)
            self.tables.append((table, param))

    @property
    def num_values(self):
        return sum(param.numel() for _, param in self.tables)

    @staticmethod
    def _values(param):
        # The parameter's memory as a NumPy array (detach: no autograd record).
        return param.detach().numpy()

    def pull(self, clock=0):
        """Reads every table into its parameter tensor."""
        for table, param in self.tables:
            self.client.pull(table, clock=clock, out=self._values(param))

    def push_pull(self, clock):
        """Pushes every tensor's gradient (param.grad) and reads its values after the push.

        With bsp consistency the read waits for every worker's push of this
        clock (the client pushes, then pulls at clock + 1).
        """
        for table, param in self.tables:
            if param.grad is None:
                raise ValueError(f"parameter of table '{table}' has no gradient: "
                                 "run backward() before push_pull")
        self.client.push_pull_many(
            [(table, param.grad.numpy(), self._values(param)) for table, param in self.tables],
            clock=clock)
