"""REST API routes (django-ninja), mounted at /api/."""

urlpatterns: list = []
