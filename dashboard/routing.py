from django.urls import path

from dashboard.consumers import BatchConsumer

websocket_urlpatterns = [
    path("ws/batches/<int:batch_id>/", BatchConsumer.as_asgi()),
]
