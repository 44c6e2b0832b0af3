import sys


def greeting(name: str = "world") -> str:
    return "Hello, world!"


if __name__ == "__main__":
    print(greeting(*sys.argv[1:2]))
