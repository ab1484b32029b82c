from django.http import HttpResponse


def run_list(request):
    return HttpResponse("Workbench")
