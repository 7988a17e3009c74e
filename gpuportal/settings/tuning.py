"""What a site tunes through the environment and the test suite pins: the API's throttle rates, the longest
job runtime and the simulated cluster's clock. The embedded and production profiles read them here; test.py
gives fixed values instead, so that a variable left in a developer's shell cannot change what the tests see."""

from gpuportal.settings.api import environment_throttle_rates, rest_framework
from gpuportal.settings.environment import env_float, env_int
from gpuportal.settings.scheduling import DEFAULT_MAX_RUNTIME_MINUTES, DEFAULT_SIMULATION_TIME_SCALE, scheduler

REST_FRAMEWORK = rest_framework(environment_throttle_rates())
SCHEDULER = scheduler(env_int("GPUPORTAL_MAX_RUNTIME_MINUTES", DEFAULT_MAX_RUNTIME_MINUTES))
SIMULATION_TIME_SCALE = env_float("GPUPORTAL_SIMULATION_TIME_SCALE", DEFAULT_SIMULATION_TIME_SCALE)
