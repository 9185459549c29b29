"""What ShardedEmbeddingBag and ServerParameters share: reading an optimizer
argument into create_table's keywords, and checking a table the servers
already hold."""

from typing import Any, Dict, Mapping, Optional, Union

Optimizer = Union[None, str, Mapping[str, Any]]


def optimizer_fields(call: str, optimizer: Optimizer) -> Optional[Dict[str, Any]]:
    """create_table's optimizer keywords: {"optimizer": name} for a name, a
    copy of a mapping (e.g. paramserver.flags.optimizer(args)); None stays
    None (the table must exist)."""
    if optimizer is None:
        return None
    if isinstance(optimizer, str):
        return {"optimizer": optimizer}
    if isinstance(optimizer, Mapping):
        fields = dict(optimizer)
        fields.setdefault("optimizer", "sgd")
        return fields
    raise TypeError(f"{call}: optimizer must be a name ('adagrad'), a dict of create_table's "
                    f"optimizer keywords, or None (the table exists); got "
                    f"{type(optimizer).__name__}")


def check_existing(call: str, client: Any, table: str, width: int,
                   num_keys: Optional[int] = None) -> Dict[str, Any]:
    """The servers' definition of `table`; ValueError when its width (or a
    dense table's size) is not the one expected. paramserver.Error NOT_FOUND
    when no server holds it."""
    definition = client.table_definition(table)
    if definition["width"] != width:
        raise ValueError(f"{call}: table '{table}' on the servers has width "
                         f"{definition['width']}, not {width}")
    if num_keys is not None and definition["num_keys"] != num_keys:
        raise ValueError(f"{call}: table '{table}' on the servers has {definition['num_keys']} "
                         f"keys, not {num_keys}")
    return definition
