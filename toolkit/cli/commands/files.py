"""``statekit schema``, ``statekit ls`` and ``statekit dump``: drill into stores and files."""

from __future__ import annotations

from itertools import islice
from typing import TYPE_CHECKING

import click
from rich.markup import escape
from rich.table import Table

from statekit.cli.options import (
    checkpoint_options,
    dumps_json,
    json_option,
    limit_option,
    open_from_cli,
    operator_option,
    parse_storage_options,
    partition_option,
    print_json,
    storage_option,
    store_option,
)
from statekit.cli.render import console
from statekit.support.presentation import dash, human_bytes

if TYPE_CHECKING:
    from rich.console import JustifyMethod

_ROLE_STYLE = {"load": "green", "retained": "", "unreferenced": "yellow",
               "stale": "yellow", "beyond-last-commit": "cyan"}


@click.command("schema")
@checkpoint_options
@operator_option
@json_option
def schema_command(checkpoint: str, storage_option: tuple[str, ...], operator: int | None,
                   as_json: bool) -> None:
    """Key and value schema of every operator/store, from the schema files Spark wrote.

    No JVM. Reads the state schema files (format v1 and v2; v3 for transformWithState, with
    every column family) and prints each schema like printSchema(). --json: one object per
    operator/store with its key, value and column families as Spark's simple strings.

    Example:

    \b
        statekit schema demo/checkpoint --operator 0
    """
    from statekit.checkpoint.checkpoint import check_selection
    from statekit.checkpoint.state_data import store_schemas
    from statekit.formats.schema import simple_string, tree_string

    ckpt = open_from_cli(checkpoint, storage_option)
    check_selection(ckpt, operator)
    operators = ckpt.operators
    schemas = {k: v for k, v in store_schemas(ckpt).items()
               if operator is None or k[0] == operator}
    if as_json:
        print_json([{
            "operator_id": op, "operator_name": getattr(operators.get(op), "name", None),
            "store": store, "schema_file_version": s.file.version,
            "key": simple_string(s.key) if s.key else None,
            "value": simple_string(s.value) if s.value else None,
            "column_families": [{"name": cf.name, "key": simple_string(cf.key_schema),
                                 "value": simple_string(cf.value_schema)}
                                for cf in s.file.column_families],
        } for (op, store), s in schemas.items()])
        return
    out = console()
    if not schemas:
        out.print("no schema files found (the query has no stateful operator yet?)")
    for (op, store), s in schemas.items():
        name = getattr(operators.get(op), "name", "?")
        out.print(f"[bold]operator {op} {name} · store {store}[/] "
                  f"(schema file v{s.file.version})")
        if s.key is not None:
            out.print(escape(tree_string(s.key, root="key")))
        if s.value is not None:
            out.print(escape(tree_string(s.value, root="value")))
        for cf in s.file.column_families:
            if cf.name == "default":
                continue
            out.print(f"column family [bold]{escape(cf.name)}[/]")
            out.print(escape(tree_string(cf.key_schema, root="  key")))
            out.print(escape(tree_string(cf.value_schema, root="  value")))
        out.print()


@click.command("ls")
@checkpoint_options
@operator_option
@partition_option(required=True)
@store_option
@json_option
def ls_command(checkpoint: str, storage_option: tuple[str, ...], operator: int | None,
               partition: int, store: str | None, as_json: bool) -> None:
    """The files of one state store instance: versions, kinds, sizes and roles.

    No JVM. An instance is one partition of one operator's store. Role: load (read to restore
    the committed version), retained (kept for older batches), or an orphan: stale (older than
    every retained batch), beyond-last-commit, or unreferenced (an SST no zip lists: a leak).
    RocksDB adds each zip's key count and how many zips reference each SST. The operator
    defaults to 0; an operator with several stores (joins) needs --store. --json: the instance
    and one object per file.

    Example:

    \b
        statekit ls demo/checkpoint --operator 0 --partition 3
    """
    from statekit.state.files import list_instance

    listing = list_instance(open_from_cli(checkpoint, storage_option, "ledger"),
                            operator or 0, partition, store)
    if as_json:
        print_json(listing.to_dict())
        return
    rocks = any(r.kind in ("zip", "sst") for r in listing.rows)
    table = Table(title=f"operator {listing.operator_id} · store {listing.store} · partition "
                        f"{listing.partition} · committed version "
                        f"{dash(listing.committed_version)}", title_justify="left")
    columns: tuple[tuple[str, JustifyMethod], ...] = (
        ("version", "right"), ("kind", "left"), ("file", "left"), ("size", "right"),
        ("role", "left"))
    for name, justify in columns:
        table.add_column(name, justify=justify)
    if rocks:
        table.add_column("keys", justify="right")
        table.add_column("referenced by", justify="right")
    for row in listing.rows:
        style = _ROLE_STYLE.get(row.role, "")
        cells = [dash(row.version), row.kind, escape(row.name), human_bytes(row.size),
                 f"[{style}]{row.role}[/]" if style else row.role]
        if rocks:
            cells += [dash(row.num_keys),
                      "" if row.referenced_by is None else f"{row.referenced_by} zips"]
        table.add_row(*cells)
    console().print(table)


@click.command("dump")
@click.argument("file", metavar="FILE")
@storage_option
@limit_option
@json_option
def dump_command(file: str, storage_option: tuple[str, ...], limit: int | None,
                 as_json: bool) -> None:
    """Decoded records of one .delta, .snapshot, .changelog or RocksDB .zip file.

    No JVM. FILE is a path or URL. Puts and deletes (merges for list state), streamed in
    constant memory whatever the file's size. For a .zip inside a checkpoint: the version's
    live state, read from the SST files it lists (pure Python: lz4, zstd, zlib or uncompressed
    blocks; snappy blocks and CRC32c checksums with the rocksdb extra). Inside a checkpoint the
    store's schema decodes keys and values; a file on its own is shown as hex. --json: one
    JSON object per record (JSON lines: "op", "key", "value").

    Examples:

    \b
        statekit dump demo/checkpoint/state/0/3/37.delta --limit 20
        statekit dump demo/checkpoint/state/0/3/33.snapshot --json
    """
    from statekit.checkpoint.location import resolve
    from statekit.state.files import open_state_file, record_text

    opened = open_state_file(resolve(file, parse_storage_options(storage_option)))
    records = islice(opened.records, limit) if limit is not None else opened.records
    if as_json:
        for r in records:
            click.echo(dumps_json({
                "op": r.op,
                "key": r.key if r.key is not None else r.key_bytes.hex(),
                "value": r.value if r.value is not None or r.value_bytes is None
                else r.value_bytes.hex()}))
        return
    table = Table(title=f"{opened.shown} ({opened.kind}"
                        + (", no schema: hex" if opened.schema is None else "") + ")",
                  title_justify="left")
    table.add_column("#", justify="right")
    table.add_column("op")
    table.add_column("key", overflow="fold")
    table.add_column("value", overflow="fold")
    count = 0
    for count, r in enumerate(records, 1):
        key, value = record_text(r)
        table.add_row(str(count), r.op, escape(key), escape(value))
    out = console()
    out.print(table)
    out.print(f"{count} records")
