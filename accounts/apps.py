from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "accounts"
    verbose_name = "Accounts: API tokens, rate limits, idempotency"

    def ready(self) -> None:
        from django.contrib.auth.signals import user_logged_in

        # AppConfig.ready: the signal receiver imports models, which exist only now.
        from accounts.invitations import on_login

        user_logged_in.connect(on_login, dispatch_uid="accounts-invitations-on-login")
