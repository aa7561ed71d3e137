"""JupyterHub for a cancho course: every student gets a server with the cancho kernel in safe mode.

Start it with ``jupyterhub -f deploy/jupyterhub/jupyterhub_config.py`` after
``sh deploy/jupyterhub/setup.sh`` (docs/teaching.md walks through it). Everything a deployment
changes is an environment variable, so the same file serves a course, the tests and the load
benchmark:

=========================  =====================================================  ==================
variable                   meaning                                                default
=========================  =====================================================  ==================
CANCHO_HUB_ROOT            the hub's directory: users' homes, state, database      /srv/cancho
CANCHO_HUB_IP / _PORT      where the hub (its proxy) listens                        127.0.0.1 / 8000
CANCHO_HUB_COURSE          directory copied into each user's home on first start   the repo's notebooks/
CANCHO_HUB_AUTH            ``dummy`` (any password; tests only) or ``pam``          pam
CANCHO_HUB_DUMMY_PASSWORD  the dummy authenticator's shared password               random: no login
CANCHO_HUB_USERS           comma-separated students allowed to log in (pam)        (none)
CANCHO_HUB_ADMINS          comma-separated admin user names                         (none)
CANCHO_HUB_API_TOKEN       a token for the ``cancho-admin`` service (admin role)    (no service)
CANCHO_HUB_MEM_LIMIT       per-user memory (cgroup, when the hub can make one)      1G
CANCHO_HUB_CPU_LIMIT       per-user CPU cores (cgroup, likewise)                    1
CANCHO_HUB_DISK_LIMIT      each home's size, a filesystem of its own (0: no bound)  2G
CANCHO_HUB_CHP             configurable-http-proxy executable                       setup.sh's, or PATH
CANCHO_HUB_IDLE_CULL       stop servers idle this many seconds (0: never)           3600
CANCHO_HUB_START_TIMEOUT   seconds a user's server may take to start               120
CANCHO_HUB_SAFE            ``0`` turns the kernel's safe mode off (trusted class)  1
CANCHO_HUB_ACCOUNT_PREFIX  students' Unix accounts are PREFIX + hub name            cancho-
=========================  =====================================================  ==================
"""

import os
import secrets
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # cancho_spawner, cgroup_limits

c = get_config()  # noqa: F821 (provided by JupyterHub when it loads this file)

env = os.environ.get
root = Path(env("CANCHO_HUB_ROOT", "/srv/cancho")).resolve()
state = root / "state"
from hub_layout import HubLayout  # noqa: E402

layout = HubLayout(root)
layout.prepare()  # root owns all but the students' own directories; state/ is root's alone

# -- the hub and its proxy ------------------------------------------------------------------------
c.JupyterHub.ip = env("CANCHO_HUB_IP", "127.0.0.1")
c.JupyterHub.port = int(env("CANCHO_HUB_PORT", "8000"))
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = int(env("CANCHO_HUB_INTERNAL_PORT", "0")) or c.JupyterHub.port + 1
c.JupyterHub.db_url = f"sqlite:///{state / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(state / "jupyterhub_cookie_secret")
c.JupyterHub.pid_file = str(state / "jupyterhub.pid")
c.JupyterHub.cleanup_servers = True  # stopping the hub stops every user's server
c.JupyterHub.cleanup_proxy = True
c.ConfigurableHTTPProxy.auth_token = secrets.token_hex(32)  # a fresh proxy token each start
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{c.JupyterHub.port + 2}"
c.ConfigurableHTTPProxy.pid_file = str(state / "proxy.pid")
chp = env("CANCHO_HUB_CHP") or shutil.which(
    "configurable-http-proxy",
    path=os.pathsep.join([str(Path(env("CANCHO_HUB_CACHE", Path.home() / ".cache" / "cancho-hub"))
                              / "chp" / "node_modules" / ".bin"), os.environ.get("PATH", "")]))
if chp:
    c.ConfigurableHTTPProxy.command = [chp]

# -- who may log in -----------------------------------------------------------------------------------
auth = env("CANCHO_HUB_AUTH", "pam")
if auth == "dummy":  # tests and the load benchmark only: anyone with the shared password
    from jupyterhub.auth import DummyAuthenticator

    c.JupyterHub.authenticator_class = DummyAuthenticator
    c.DummyAuthenticator.password = env("CANCHO_HUB_DUMMY_PASSWORD") or secrets.token_hex(16)
    c.Authenticator.allow_all = True
else:  # system accounts; only the ones listed in CANCHO_HUB_USERS (and admins) may log in
    c.JupyterHub.authenticator_class = "pam"
    c.Authenticator.allowed_users = {u for u in env("CANCHO_HUB_USERS", "").split(",") if u}
# A user name is a directory name: no separators, no dots first.
c.Authenticator.username_pattern = r"^[a-z0-9][a-z0-9_-]{0,63}$"
admins = {a for a in env("CANCHO_HUB_ADMINS", "").split(",") if a}
if admins:
    c.Authenticator.admin_users = admins
token = env("CANCHO_HUB_API_TOKEN")
if token:  # the benchmark's and the tests' way in: create users and start servers over REST
    c.JupyterHub.services = [{"name": "cancho-admin", "api_token": token}]
    c.JupyterHub.load_roles = [{"name": "admin", "services": ["cancho-admin"]}]

# -- each user's server ---------------------------------------------------------------------------
from cgroup_limits import sweep_stale  # noqa: E402

sweep_stale()  # empty per-user control groups an earlier hub left behind
c.JupyterHub.spawner_class = "cancho_spawner.CanchoSpawner"
c.CanchoSpawner.users_root = str(root / "users")
c.CanchoSpawner.state_root = str(state)
c.CanchoSpawner.account_prefix = env("CANCHO_HUB_ACCOUNT_PREFIX", "cancho-")
from prebuilt_helpers import prebuild  # noqa: E402

if prebuild(layout.helpers):  # the kernels' C helpers, built once by root, read-only to students
    c.CanchoSpawner.helper_dir = str(layout.helpers)
course = env("CANCHO_HUB_COURSE", str(HERE.parent.parent / "notebooks"))
c.CanchoSpawner.course_dir = course if Path(course).is_dir() else ""
c.CanchoSpawner.safe_mode = env("CANCHO_HUB_SAFE", "1") != "0"
c.CanchoSpawner.mem_limit = env("CANCHO_HUB_MEM_LIMIT", "1G")
c.CanchoSpawner.cpu_limit = float(env("CANCHO_HUB_CPU_LIMIT", "1"))
c.CanchoSpawner.disk_limit = env("CANCHO_HUB_DISK_LIMIT", "2G")  # each home a filesystem of this size
c.CanchoSpawner.default_url = "/lab"
# A server starts in ~4 s alone (2.5 CPU s, mostly imports); twenty at once on two busy cores
# took over two minutes in benchmarks/hub_load.py: raise this for a class that logs in together.
c.CanchoSpawner.start_timeout = c.CanchoSpawner.http_timeout = int(env("CANCHO_HUB_START_TIMEOUT", "120"))

# -- idle servers -----------------------------------------------------------------------------------
# The server stops its own idle kernels and then itself: no culler service to run.
c.CanchoSpawner.idle_timeout = int(env("CANCHO_HUB_IDLE_CULL", "3600"))
