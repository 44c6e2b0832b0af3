from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("", include("dashboard.urls")),
]

# A bad query value (a number beyond 64 bits) answers 400 with its one sentence.
handler400 = "dashboard.views.bad_request"
