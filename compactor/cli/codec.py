"""``compactor codec-server`` and ``compactor codec-key``: payload encryption for operators."""

from __future__ import annotations

import argparse
import os

import json

from compactor.cli.common import add_json_arg
from compactor.cli.common import settings as load_settings
from compactor.errors import InvalidInput

DEFAULT_UI_ORIGIN = "http://localhost:8233"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "codec-server",
        help="decode encrypted payloads for the Temporal UI / CLI (codec server protocol)",
        description="Serve POST /encode and /decode with the keys in COMPACTOR_CODEC_KEYS / "
        "COMPACTOR_CODEC_KEY_FILE. Point the Temporal UI's codec server setting (or "
        "`temporal workflow show --codec-endpoint`) at it.",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default %(default)s)")
    p.add_argument("--port", type=int, default=8081, help="port (default %(default)s)")
    p.add_argument(
        "--cors-origin", action="append", default=None, metavar="ORIGIN",
        help=f"browser origin allowed to call it (repeatable; default {DEFAULT_UI_ORIGIN})",
    )
    p.add_argument(
        "--token-env", default=None, metavar="VAR",
        help="environment variable holding the bearer token every request must carry "
        "(Authorization: Bearer <token>); without it any local caller may decode",
    )
    add_json_arg(p, "print the server's address, keys and origins as one JSON line once it listens")
    p.set_defaults(func=cmd_codec_server)

    k = sub.add_parser("codec-key", help="print a new payload encryption key (ID:BASE64)")
    k.add_argument("--id", default="k1", help="key id written into each payload (default %(default)s)")
    add_json_arg(k, 'print {"key": "ID:BASE64", "id": ID}')
    k.set_defaults(func=cmd_codec_key)


def cmd_codec_key(args: argparse.Namespace) -> int:
    from workers.codec import new_key

    key = new_key(args.id)
    print(json.dumps({"key": key, "id": args.id}) if args.json else key)
    return 0


def cmd_codec_server(args: argparse.Namespace) -> int:
    from workers.codec import EncryptionCodec, keyring_from_settings
    from workers.codec_server import CodecServer

    ring = keyring_from_settings(load_settings())
    if ring is None:
        raise InvalidInput(
            "no codec keys: set COMPACTOR_CODEC_KEYS (e.g. from `compactor codec-key`) or "
            "COMPACTOR_CODEC_KEY_FILE"
        )
    token = None
    if args.token_env:
        token = os.environ.get(args.token_env)
        if not token:
            raise InvalidInput(f"--token-env {args.token_env}: that variable is unset or empty")
    origins = args.cors_origin or [DEFAULT_UI_ORIGIN]
    try:
        server = CodecServer(EncryptionCodec(ring), host=args.host, port=args.port,
                             cors_origins=origins, token=token)
    except OSError as exc:
        raise InvalidInput(f"cannot listen on {args.host}:{args.port}: {exc.strerror}") from None
    keys = ", ".join(sorted(ring.all_keys()))
    if args.json:
        print(json.dumps({"url": server.url, "keys": sorted(ring.all_keys()), "cors_origins": origins,
                          "token_required": bool(token)}), flush=True)
    else:
        print(f"codec server {server.url}  keys {keys}  CORS {', '.join(origins)}  "
              f"{'bearer token required' if token else 'NO token (local use only)'}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
