from oauth2_provider.oauth2_validators import OAuth2Validator


class GroupsValidator(OAuth2Validator):
    """Standard claims plus ``groups`` (the person's Django groups here), released with the "groups" scope."""

    oidc_claim_scope = {**OAuth2Validator.oidc_claim_scope, "groups": "groups"}

    def get_additional_claims(self, request):
        user = request.user
        return {"preferred_username": user.username, "email": user.email, "given_name": user.first_name,
                "family_name": user.last_name, "groups": sorted(user.groups.values_list("name", flat=True))}
