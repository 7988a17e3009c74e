"""The real servers the directory tests sign in against, each in a process of its own on a loopback port.

* ``Slapd``: Debian's OpenLDAP server with a configuration written to a temporary directory (``slapd.conf``,
  the mdb backend, a certificate from a CA of its own for StartTLS and ldaps://), loaded with ``ldapadd``:
  people with passwords, ``groupOfNames`` groups, a person the directory marks disabled, and the portal's own
  bind DN.
* ``OIDCProvider``: ``tests/directory/oidc_provider``, a small Django project with django-oauth-toolkit's
  OpenID Connect provider (RSA key generated at start, a confidential client that must use PKCE).

Both are started once per test module (``tests/directory/conftest.py``).
"""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import ldap
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

ROOT = Path(__file__).resolve().parents[2]
SUFFIX = "dc=example,dc=org"
ADMIN_DN = f"cn=admin,{SUFFIX}"
ADMIN_PASSWORD = "directory-admin-secret"
PORTAL_DN = f"cn=portal,ou=services,{SUFFIX}"
PORTAL_PASSWORD = "portal-bind-secret"
PEOPLE = f"ou=people,{SUFFIX}"
GROUPS = f"ou=groups,{SUFFIX}"
#: People are disabled in the test directory by this attribute (GPUPORTAL_LDAP_DISABLED_FILTER).
DISABLED_FILTER = "(employeeType=disabled)"

#: uid -> (given name, surname, password, disabled)
DIRECTORY_PEOPLE = {
    "ada": ("Ada", "Lovelace", "ada-password-1", False),
    "grace": ("Grace", "Hopper", "grace-password-1", False),
    "hedy": ("Hedy", "Lamarr", "hedy-password-1", False),
    "ivan": ("Ivan", "Sutherland", "ivan-password-1", False),
    "karen": ("Karen", "Jones", "karen-password-1", False),
    "linus": ("Linus", "Pauling", "linus-password-1", False),
    "mallory": ("Mallory", "Disabled", "mallory-password-1", True),
}
#: group cn -> member uids
DIRECTORY_GROUPS = {
    "vision-researchers": ["ada", "hedy", "ivan"],
    "nlp-researchers": ["grace", "karen"],  # a groupOfNames has at least one member
    "portal-managers": ["linus"],
    "everyone": list(DIRECTORY_PEOPLE),
}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def person_dn(uid: str) -> str:
    return f"uid={uid},{PEOPLE}"


def group_dn(cn: str) -> str:
    return f"cn={cn},{GROUPS}"


def _ldif() -> str:
    entries = [
        f"dn: {SUFFIX}\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: Example",
        f"dn: {PEOPLE}\nobjectClass: organizationalUnit\nou: people",
        f"dn: {GROUPS}\nobjectClass: organizationalUnit\nou: groups",
        f"dn: ou=services,{SUFFIX}\nobjectClass: organizationalUnit\nou: services",
        f"dn: {PORTAL_DN}\nobjectClass: organizationalRole\nobjectClass: simpleSecurityObject\ncn: portal\n"
        f"userPassword: {PORTAL_PASSWORD}",
    ]
    for uid, (given, surname, password, disabled) in DIRECTORY_PEOPLE.items():
        entries.append(f"dn: {person_dn(uid)}\nobjectClass: inetOrgPerson\nuid: {uid}\ncn: {given} {surname}\n"
                       f"givenName: {given}\nsn: {surname}\nmail: {uid}@example.org\nuserPassword: {password}"
                       + ("\nemployeeType: disabled" if disabled else ""))
    for cn, members in DIRECTORY_GROUPS.items():
        entries.append(f"dn: {group_dn(cn)}\nobjectClass: groupOfNames\ncn: {cn}\n"
                       + "\n".join(f"member: {person_dn(uid)}" for uid in members))
    return "\n\n".join(entries) + "\n"


SLAPD_CONF = """\
include /etc/ldap/schema/core.schema
include /etc/ldap/schema/cosine.schema
include /etc/ldap/schema/inetorgperson.schema
pidfile {state}/slapd.pid
argsfile {state}/slapd.args
modulepath /usr/lib/ldap
moduleload back_mdb
database mdb
maxsize 33554432
suffix "{suffix}"
rootdn "{admin}"
rootpw {admin_password}
directory {state}/data
index objectClass eq
index uid eq
index member eq
TLSCACertificateFile {state}/ca.pem
TLSCertificateFile {state}/server.pem
TLSCertificateKeyFile {state}/server.key
# Passwords are for binding only; the portal's bind DN reads everything else, people read nothing.
access to attrs=userPassword by anonymous auth by * none
access to * by dn.exact="{portal}" read by self read by * none
"""


def _write_certificates(state: Path) -> None:
    """A certificate authority of the test's own (``ca.pem``) and the server's certificate for 127.0.0.1 signed by
    it, so that StartTLS and ldaps:// are checked against ``GPUPORTAL_LDAP_CA_FILE`` as on a site."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "gpuportal test directory CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
          .not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    server_key = ec.generate_private_key(ec.SECP256R1())
    server = (x509.CertificateBuilder()
              .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
              .issuer_name(ca_name).public_key(server_key.public_key()).serial_number(x509.random_serial_number())
              .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=1))
              .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                             critical=False)
              .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
              .sign(ca_key, hashes.SHA256()))
    (state / "ca.pem").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    (state / "server.pem").write_bytes(server.public_bytes(serialization.Encoding.PEM))
    (state / "server.key").write_bytes(server_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))


class _ServerProcess:
    """A server of the tests in a process of its own, with a state directory removed when it stops."""

    process: subprocess.Popen | None
    state: Path

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.state, ignore_errors=True)


class Slapd(_ServerProcess):
    """One slapd process serving a directory of its own on ``uri``."""

    def __init__(self):
        for tool in ("slapd", "ldapadd"):
            if not shutil.which(tool) and not Path(f"/usr/sbin/{tool}").exists():
                raise RuntimeError(f"{tool} is missing: run scripts/ensure-build-deps.sh --test-servers")
        self.state = Path(tempfile.mkdtemp(prefix="gpuportal-slapd-"))
        (self.state / "data").mkdir()
        self.port, self.tls_port = free_port(), free_port()
        self.uri = f"ldap://127.0.0.1:{self.port}"
        self.ldaps_uri = f"ldaps://127.0.0.1:{self.tls_port}"
        self.ca_file = str(self.state / "ca.pem")
        _write_certificates(self.state)
        (self.state / "slapd.conf").write_text(SLAPD_CONF.format(
            state=self.state, suffix=SUFFIX, admin=ADMIN_DN, admin_password=ADMIN_PASSWORD, portal=PORTAL_DN))
        (self.state / "bind-password").write_text(PORTAL_PASSWORD + "\n")
        self.process = None

    def start(self) -> Slapd:
        slapd = shutil.which("slapd") or "/usr/sbin/slapd"
        # -d 0: stay in the foreground (so the test owns the process) without writing debug output.
        self.process = subprocess.Popen([slapd, "-d", "0", "-f", str(self.state / "slapd.conf"), "-h",
                                         f"{self.uri}/ {self.ldaps_uri}/"],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 15
        while True:
            try:
                self.admin().unbind_s()
                break
            except ldap.SERVER_DOWN:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    error = self.process.stderr.read().decode() if self.process.poll() is not None else "time-out"
                    self.stop()
                    raise RuntimeError(f"slapd did not start: {error}") from None
                time.sleep(0.05)
        ldapadd = shutil.which("ldapadd") or "/usr/bin/ldapadd"
        subprocess.run([ldapadd, "-x", "-H", self.uri, "-D", ADMIN_DN, "-w", ADMIN_PASSWORD], input=_ldif().encode(),
                       check=True, capture_output=True)
        return self

    def admin(self):
        connection = ldap.initialize(self.uri, bytes_mode=False)
        connection.set_option(ldap.OPT_NETWORK_TIMEOUT, 2)
        connection.simple_bind_s(ADMIN_DN, ADMIN_PASSWORD)
        return connection

    def _change(self, dn: str, changes: list) -> None:
        connection = self.admin()
        try:
            connection.modify_s(dn, changes)
        finally:
            connection.unbind_s()

    def add_member(self, group: str, uid: str) -> None:
        """Put ``uid`` in ``group`` (nothing if already there)."""
        with contextlib.suppress(ldap.TYPE_OR_VALUE_EXISTS):
            self._change(group_dn(group), [(ldap.MOD_ADD, "member", [person_dn(uid).encode()])])

    def remove_member(self, group: str, uid: str) -> None:
        """Take ``uid`` out of ``group`` (nothing if not there)."""
        with contextlib.suppress(ldap.NO_SUCH_ATTRIBUTE):
            self._change(group_dn(group), [(ldap.MOD_DELETE, "member", [person_dn(uid).encode()])])

    def set_disabled(self, uid: str, disabled: bool) -> None:
        self._change(person_dn(uid), [(ldap.MOD_REPLACE, "employeeType", [b"disabled"] if disabled else [])])

    def delete_person(self, uid: str) -> None:
        connection = self.admin()
        try:
            for cn, members in DIRECTORY_GROUPS.items():
                if uid in members:
                    with contextlib.suppress(ldap.NO_SUCH_ATTRIBUTE):
                        connection.modify_s(group_dn(cn), [(ldap.MOD_DELETE, "member", [person_dn(uid).encode()])])
            connection.delete_s(person_dn(uid))
        finally:
            connection.unbind_s()

    def settings(self, **overrides) -> dict:
        """``settings.DIRECTORY["LDAP"]`` for this server, as the settings block builds it from the environment."""
        return {"URI": self.uri, "BIND_DN": PORTAL_DN, "BIND_PASSWORD": PORTAL_PASSWORD, "USER_BASE": PEOPLE,
                "USER_FILTER": "(uid=%(user)s)", "GROUP_BASE": GROUPS, "GROUP_FILTER": "(objectClass=groupOfNames)",
                "DISABLED_FILTER": DISABLED_FILTER, "CA_FILE": "", "START_TLS": False, "TIMEOUT_SECONDS": 2.0,
                **overrides}

    def environment(self) -> dict:
        """The GPUPORTAL_LDAP_* variables an operator would set for this server."""
        return {"GPUPORTAL_LDAP_URI": self.uri, "GPUPORTAL_LDAP_BIND_DN": PORTAL_DN,
                "GPUPORTAL_LDAP_BIND_PASSWORD_FILE": str(self.state / "bind-password"),
                "GPUPORTAL_LDAP_USER_BASE": PEOPLE, "GPUPORTAL_LDAP_USER_FILTER": "(uid=%(user)s)",
                "GPUPORTAL_LDAP_GROUP_BASE": GROUPS, "GPUPORTAL_LDAP_DISABLED_FILTER": DISABLED_FILTER,
                "GPUPORTAL_LDAP_CA_FILE": self.ca_file, "GPUPORTAL_LDAP_START_TLS": "1"}


class OIDCProvider(_ServerProcess):
    """``tests/directory/oidc_provider/serve.py`` in its own process on ``issuer``."""

    CLIENT_ID = "gpuportal-tests"
    CLIENT_SECRET = "gpuportal-tests-client-secret"
    TEST_SECRET = "provider-test-hook-secret"
    #: username -> (password, groups)
    USERS = {"olga": ("olga-password-1", ["vision-researchers"]),
             "pavel": ("pavel-password-1", ["nlp-researchers", "portal-managers"]),
             "quinn": ("quinn-password-1", ["vision-researchers"])}

    def __init__(self):
        self.state = Path(tempfile.mkdtemp(prefix="gpuportal-oidc-"))
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.issuer = f"{self.base}/o"
        self.process = None

    def start(self) -> OIDCProvider:
        setup = {"client_id": self.CLIENT_ID, "client_secret": self.CLIENT_SECRET, "test_secret": self.TEST_SECRET,
                 "redirect_uris": ["http://testserver/oidc/callback/", "http://localhost/oidc/callback/",
                                   "http://127.0.0.1/oidc/callback/"],
                 "post_logout_redirect_uris": ["http://testserver/accounts/login/", "http://localhost/accounts/login/",
                                               "http://127.0.0.1/accounts/login/"],
                 "users": [{"username": name, "password": password, "email": f"{name}@provider.example",
                            "groups": groups} for name, (password, groups) in self.USERS.items()]}
        (self.state / "setup.json").write_text(json.dumps(setup))
        log = (self.state / "provider.log").open("wb")
        self.process = subprocess.Popen(
            [sys.executable, str(ROOT / "tests/directory/oidc_provider/serve.py"), str(self.port), str(self.state)],
            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
            env={k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"})
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{self.issuer}/.well-known/openid-configuration", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("the OpenID Connect provider did not start: "
                                   + (self.state / "provider.log").read_text(errors="replace")[-3000:])
            time.sleep(0.1)
        return self

    def set_groups(self, username: str, groups: list[str]) -> None:
        """Change a person's groups at the provider (its test-only hook)."""
        request = urllib.request.Request(f"{self.base}/test/groups/", method="POST", data=json.dumps(
            {"username": username, "groups": groups}).encode(), headers={"X-Test-Secret": self.TEST_SECRET})
        with urllib.request.urlopen(request, timeout=5) as answer:
            assert answer.status == 200

    def settings(self, **overrides) -> dict:
        """``settings.DIRECTORY["OIDC"]`` for this provider."""
        return {"ISSUER": self.issuer, "CLIENT_ID": self.CLIENT_ID, "CLIENT_SECRET": self.CLIENT_SECRET,
                "GROUPS_CLAIM": "groups", "SCOPES": "openid email profile groups", "PROVIDER_NAME": "Test provider",
                "CA_FILE": "", "TIMEOUT_SECONDS": 5.0, **overrides}
