"""Sign-in and API tokens: lockout of failed sign-ins, hashed expiring API tokens, API throttles.

It sits on the tenants layer and imports only ``gpuportal`` and Django: every API of the upper layers
authenticates through ``accounts.authentication`` without this app knowing them."""
