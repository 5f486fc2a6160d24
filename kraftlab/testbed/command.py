"""`kraftlab testbed up|status|down|exec` (docs/testbed.md)."""

from __future__ import annotations

import sys

import click

from . import lifecycle
from .plan import DEFAULT_HOSTS, DEFAULT_NAME

NAME_OPTION = click.option("--name", default=DEFAULT_NAME, show_default=True, help="The testbed's name (several may be up at once).")


def _refused(exc: lifecycle.TestbedError) -> None:
    click.echo(f"error: {exc}", err=True)
    sys.exit(2)


@click.group()
def testbed() -> None:
    """Emulated hosts on this Linux machine (as root): each with its own network namespace and
    address in 198.18.0.0/15, /tmp, /dev/shm, home and data directory, process namespace and sshd;
    and a `ray up` file for them."""


@testbed.command("up")
@click.option("--hosts", type=int, default=DEFAULT_HOSTS, show_default=True, help="How many hosts (h1..hN).")
@NAME_OPTION
def up(hosts: int, name: str) -> None:
    """Make the hosts; they run until `kraftlab testbed down`. Writes testbed.json and cluster.yaml."""
    try:
        described = lifecycle.up(name, hosts, log=lambda m: click.echo(m, err=True))
    except lifecycle.TestbedError as exc:
        _refused(exc)
        return
    for host in described["hosts"]:
        click.echo(f"{host['name']}  {host['address']}  ssh -i {host['ssh_key']} {host['ssh_user']}@{host['address']}")
    click.echo(f"testbed.json: {lifecycle.state_root() / name / 'testbed.json'}")
    click.echo(f"cluster file: {described['cluster_file']}  (ray up -y {described['cluster_file']})")


@testbed.command("status")
@NAME_OPTION
def status(name: str) -> None:
    """Exit 0 when every host runs and its sshd answers, else 1."""
    try:
        hosts = lifecycle.status(name)
    except lifecycle.TestbedError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    for host in hosts:
        state = "up" if host.sshd else ("running, sshd does not answer" if host.running else "down")
        click.echo(f"{host.name}  {host.address}  {state}")
    sys.exit(0 if all(h.sshd for h in hosts) else 1)


@testbed.command("down")
@NAME_OPTION
def down(name: str) -> None:
    """Remove every process, namespace, interface and folder of the testbed (idempotent)."""
    try:
        removed = lifecycle.down(name, log=lambda m: click.echo(m, err=True))
    except lifecycle.TestbedError as exc:
        _refused(exc)
        return
    if not removed:
        click.echo(f"testbed {name}: nothing to remove", err=True)


@testbed.command("exec", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.argument("host")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@NAME_OPTION
def exec_(host: str, command: tuple[str, ...], name: str) -> None:
    """Run COMMAND on HOST (h1..hN) in its namespaces; exits with the command's code.

    kraftlab testbed exec h1 -- ray status"""
    args = list(command)
    if "--" in args:  # options may also stand between HOST and `--` (click leaves them in COMMAND)
        options, args = args[: args.index("--")], args[args.index("--") + 1 :]
        while options:
            if options[0] == "--name" and len(options) > 1:
                name, options = options[1], options[2:]
            elif options[0].startswith("--name="):
                name, options = options[0].split("=", 1)[1], options[1:]
            else:
                _refused(lifecycle.TestbedError(f"unexpected {options[0]!r} before `--` (only --name NAME)"))
    try:
        code = lifecycle.exec_command(name, host, args)
    except lifecycle.TestbedError as exc:
        _refused(exc)
        return
    sys.exit(code)
