"""How passwords are stored: Argon2id with the parameters OWASP's Password Storage Cheat Sheet gives as its first
choice (19 MiB of memory, 2 passes, 1 lane).

Django's default, PBKDF2-SHA256 with 1,000,000 iterations, cost 0.3 to 0.7 s of CPU per sign-in on the demo's
two cores, most of the time from the login form to the dashboard. Argon2id at these parameters costs about
0.07 s and is memory-hard, so a guessing attack on a stolen hash gains less from GPUs than against PBKDF2.
Hashes stored before are still accepted (the older hashers stay listed in ``PASSWORD_HASHERS``) and are
rewritten as Argon2id at the person's next sign-in (Django's ``check_password`` upgrade).
"""

from django.contrib.auth.hashers import Argon2PasswordHasher


class OwaspArgon2idHasher(Argon2PasswordHasher):
    """Argon2id, m=19 MiB, t=2, p=1: OWASP's minimum configuration. Same algorithm name as Django's, so its
    hashes read as Django's own; a hash with other parameters is rewritten with these at sign-in."""

    time_cost = 2
    memory_cost = 19 * 1024  # KiB
    parallelism = 1
